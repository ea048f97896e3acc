//! Errors of the in-stream engine. Every message names the model file, and where a node is at
//! fault its name and op type, so a person can find it in Netron and change the export.

use std::path::PathBuf;

#[derive(thiserror::Error, Debug)]
pub enum InferError {
    #[error("model {}: cannot read it: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("model {file}: not a valid ONNX protobuf ({reason}); check that the file is a complete .onnx model")]
    Parse { file: String, reason: String },
    #[error("model {file}: {reason}")]
    Graph { file: String, reason: String },
    #[error(
        "model {file}: node \"{node}\" has op type {op_type}, which the in-stream engine does not support; \
         supported: {supported}"
    )]
    Unsupported {
        file: String,
        node: String,
        op_type: String,
        supported: String,
    },
    #[error("model {file}: node \"{node}\" ({op_type}): {reason}")]
    Node {
        file: String,
        node: String,
        op_type: String,
        reason: String,
    },
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Gpu(#[from] crate::gpu::Error),
    #[error(transparent)]
    Fault(#[from] crate::fault::Fault),
}

pub type Result<T> = std::result::Result<T, InferError>;

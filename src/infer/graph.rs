//! The ONNX graph as the planner sees it: graph inputs with their (possibly symbolic) dims,
//! constants folded from initialisers and Constant nodes, and the remaining nodes.

use std::collections::HashMap;
use std::path::Path;

use onnx_protobuf::attribute_proto::AttributeType;
use onnx_protobuf::tensor_shape_proto::dimension::Value as DimValue;
use onnx_protobuf::type_proto::Value as TypeValue;
use onnx_protobuf::{Message, ModelProto, NodeProto};

use super::error::{InferError, Result};
use super::tensor::{self, Const};

/// One dimension of a graph input: fixed, or a name bound at plan time (`height`, `width`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    Fixed(usize),
    Symbolic(String),
}

#[derive(Clone, Debug)]
pub struct GraphInput {
    pub name: String,
    pub dims: Vec<Dim>,
}

pub struct Graph {
    /// The model file as messages name it (a path, or `<memory>` for built-in test graphs).
    pub file: String,
    pub inputs: Vec<GraphInput>,
    pub outputs: Vec<String>,
    pub consts: HashMap<String, Const>,
    /// Every node except Constant ones, in file order.
    pub nodes: Vec<NodeProto>,
    pub metadata: HashMap<String, String>,
}

impl Graph {
    pub fn load(path: &Path) -> Result<Self> {
        crate::fault::check("model load", &path.display().to_string())?;
        let bytes = std::fs::read(path).map_err(|source| InferError::Io {
            path: path.to_path_buf(),
            error: source,
        })?;
        Self::from_bytes(&bytes, &path.display().to_string())
    }

    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Self> {
        let model = ModelProto::parse_from_bytes(bytes).map_err(|e| InferError::Parse {
            file: file.into(),
            reason: e.to_string(),
        })?;
        Self::from_model(&model, file)
    }

    pub fn from_model(model: &ModelProto, file: &str) -> Result<Self> {
        let graph_err = |reason: String| InferError::Graph {
            file: file.into(),
            reason,
        };
        let Some(g) = model.graph.as_ref() else {
            return Err(graph_err("it has no graph".into()));
        };
        let mut consts = HashMap::new();
        for init in &g.initializer {
            let c = tensor::from_proto(init).map_err(graph_err)?;
            consts.insert(init.name.clone(), c);
        }
        let mut nodes = Vec::new();
        for node in &g.node {
            if node.op_type == "Constant" && node.domain.is_empty() {
                let c = constant_value(node).map_err(|reason| node_error(file, node, reason))?;
                let out = node.output.first().cloned().unwrap_or_default();
                consts.insert(out, c);
            } else {
                nodes.push(node.clone());
            }
        }
        let inputs = g
            .input
            .iter()
            .filter(|i| !consts.contains_key(&i.name))
            .map(|i| graph_input(i).map_err(graph_err))
            .collect::<Result<Vec<_>>>()?;
        if inputs.is_empty() {
            return Err(graph_err("the graph has no runtime input".into()));
        }
        let outputs: Vec<String> = g.output.iter().map(|o| o.name.clone()).collect();
        if outputs.is_empty() {
            return Err(graph_err("the graph has no output".into()));
        }
        let metadata = model
            .metadata_props
            .iter()
            .map(|p| (p.key.clone(), p.value.clone()))
            .collect();
        Ok(Self {
            file: file.into(),
            inputs,
            outputs,
            consts,
            nodes,
            metadata,
        })
    }
}

fn graph_input(info: &onnx_protobuf::ValueInfoProto) -> std::result::Result<GraphInput, String> {
    let tensor = match info.type_.as_ref().and_then(|t| t.value.as_ref()) {
        Some(TypeValue::TensorType(t)) => t,
        _ => return Err(format!("graph input \"{}\" is not a tensor", info.name)),
    };
    if tensor.elem_type != 1 {
        return Err(format!(
            "graph input \"{}\" has element type {}; the engine runs float32 (type 1) models",
            info.name, tensor.elem_type
        ));
    }
    let dims = match tensor.shape.as_ref() {
        Some(shape) => shape
            .dim
            .iter()
            .enumerate()
            .map(|(i, d)| match &d.value {
                Some(DimValue::DimValue(v)) if *v > 0 => Dim::Fixed(*v as usize),
                Some(DimValue::DimParam(p)) => Dim::Symbolic(p.clone()),
                _ => Dim::Symbolic(format!("{}[{i}]", info.name)),
            })
            .collect(),
        None => Vec::new(),
    };
    Ok(GraphInput {
        name: info.name.clone(),
        dims,
    })
}

fn constant_value(node: &NodeProto) -> std::result::Result<Const, String> {
    let attr = node
        .attribute
        .first()
        .ok_or("a Constant node needs a value attribute")?;
    match attr.name.as_str() {
        "value" => tensor::from_proto(attr.t.as_ref().ok_or("value has no tensor")?),
        "value_float" => Ok(Const::floats(vec![], vec![attr.f])),
        "value_floats" => Ok(Const::floats(vec![attr.floats.len()], attr.floats.clone())),
        "value_int" => Ok(Const {
            shape: vec![],
            data: vec![attr.i as f32],
            ints: Some(vec![attr.i]),
        }),
        "value_ints" => Ok(Const {
            shape: vec![attr.ints.len()],
            data: attr.ints.iter().map(|&v| v as f32).collect(),
            ints: Some(attr.ints.clone()),
        }),
        other => Err(format!("Constant attribute {other} is not supported")),
    }
}

pub fn node_error(file: &str, node: &NodeProto, reason: impl Into<String>) -> InferError {
    InferError::Node {
        file: file.into(),
        node: node.name.clone(),
        op_type: node.op_type.clone(),
        reason: reason.into(),
    }
}

/// Typed attribute access for one node; every failure names the node.
pub struct Attrs<'a> {
    pub node: &'a NodeProto,
    pub file: &'a str,
}

impl<'a> Attrs<'a> {
    pub fn err(&self, reason: impl Into<String>) -> InferError {
        node_error(self.file, self.node, reason)
    }

    fn get(
        &self,
        name: &str,
        ty: AttributeType,
    ) -> Result<Option<&'a onnx_protobuf::AttributeProto>> {
        match self.node.attribute.iter().find(|a| a.name == name) {
            None => Ok(None),
            Some(a) if a.type_.enum_value() == Ok(ty) => Ok(Some(a)),
            Some(a) => Err(self.err(format!(
                "attribute {name} has type {:?}, expected {ty:?}",
                a.type_
            ))),
        }
    }

    pub fn int(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.get(name, AttributeType::INT)?.map_or(default, |a| a.i))
    }

    pub fn float(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self
            .get(name, AttributeType::FLOAT)?
            .map_or(default, |a| a.f))
    }

    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        Ok(self.get(name, AttributeType::INTS)?.map(|a| a.ints.clone()))
    }

    pub fn string(&self, name: &str, default: &str) -> Result<String> {
        Ok(self
            .get(name, AttributeType::STRING)?
            .map_or(default.to_string(), |a| {
                String::from_utf8_lossy(&a.s).into_owned()
            }))
    }

    /// Fails on any attribute not in `known`, so a setting the engine would ignore is reported.
    pub fn only(&self, known: &[&str]) -> Result<()> {
        match self
            .node
            .attribute
            .iter()
            .find(|a| !known.contains(&a.name.as_str()))
        {
            Some(a) => Err(self.err(format!(
                "attribute {} is not supported (known: {})",
                a.name,
                known.join(", ")
            ))),
            None => Ok(()),
        }
    }
}

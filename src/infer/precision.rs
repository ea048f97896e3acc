//! The engine's storage precision: how its tensors and weights are kept in GPU memory. fp32 is
//! the reference; fp16 halves every tensor's bytes and feeds the matrix units, with arithmetic
//! and accumulation in fp32 where the kernel allows it. One shader source builds both (the
//! `sfp` type macro of `shaders/ops/precision.glsl`).

use std::fmt;

use crate::gpu::DeviceInfo;

/// The element type of a runtime tensor (and of the weights next to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Fp16,
}

impl Precision {
    pub const ALL: [Precision; 2] = [Precision::Fp32, Precision::Fp16];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
        }
    }

    pub fn parse(s: &str) -> Option<Precision> {
        Precision::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Precision::Fp32 => 4,
            Precision::Fp16 => 2,
        }
    }

    /// Host values as this type's bytes (round to nearest even for fp16), for uploads.
    pub fn encode(self, data: &[f32]) -> Vec<u8> {
        match self {
            Precision::Fp32 => bytemuck::cast_slice(data).to_vec(),
            Precision::Fp16 => {
                let halves: Vec<half::f16> = data.iter().map(|&v| half::f16::from_f32(v)).collect();
                bytemuck::cast_slice(&halves).to_vec()
            }
        }
    }

    /// Bytes of this type back to host values, for readbacks.
    pub fn decode(self, bytes: &[u8]) -> Vec<f32> {
        match self {
            Precision::Fp32 => bytemuck::pod_collect_to_vec(bytes),
            Precision::Fp16 => {
                let halves: Vec<half::f16> = bytemuck::pod_collect_to_vec(bytes);
                halves.iter().map(|h| h.to_f32()).collect()
            }
        }
    }

    /// Why this device cannot store tensors in this precision (None: it can).
    pub fn unsupported_on(self, device: &DeviceInfo) -> Option<String> {
        match self {
            Precision::Fp32 => None,
            Precision::Fp16 if device.fp16_storage => None,
            Precision::Fp16 => Some(format!(
                "{} lacks shaderFloat16 or 16-bit storage buffers",
                device.name
            )),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `upscale.precision`: a precision, or `auto` (fp16 where the device stores it, else fp32).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrecisionChoice {
    #[default]
    Auto,
    Fp32,
    Fp16,
}

impl PrecisionChoice {
    pub const NAMES: [&'static str; 3] = ["auto", "fp32", "fp16"];

    pub fn parse(s: &str) -> Option<PrecisionChoice> {
        match s {
            "auto" => Some(PrecisionChoice::Auto),
            "fp32" => Some(PrecisionChoice::Fp32),
            "fp16" => Some(PrecisionChoice::Fp16),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The precision to run on `device`, and why it differs from the one asked for (a device
    /// without fp16 storage falls back to fp32 and says so; it never fails).
    pub fn resolve(self, device: &DeviceInfo) -> (Precision, Option<String>) {
        match self {
            PrecisionChoice::Fp32 => (Precision::Fp32, None),
            PrecisionChoice::Auto => match Precision::Fp16.unsupported_on(device) {
                None => (Precision::Fp16, None),
                Some(_) => (Precision::Fp32, None),
            },
            PrecisionChoice::Fp16 => match Precision::Fp16.unsupported_on(device) {
                None => (Precision::Fp16, None),
                Some(why) => (Precision::Fp32, Some(format!("fp16: {why}; running fp32"))),
            },
        }
    }
}

impl From<Precision> for PrecisionChoice {
    fn from(p: Precision) -> Self {
        match p {
            Precision::Fp32 => PrecisionChoice::Fp32,
            Precision::Fp16 => PrecisionChoice::Fp16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_fp16_rounds_to_nearest() {
        let values = [0.0, 1.0, -2.5, 0.1, 65504.0, 1.0 / 255.0];
        assert_eq!(
            Precision::Fp32.decode(&Precision::Fp32.encode(&values)),
            values
        );
        let back = Precision::Fp16.decode(&Precision::Fp16.encode(&values));
        assert_eq!(Precision::Fp16.encode(&values).len(), values.len() * 2);
        for (v, b) in values.iter().zip(&back) {
            // fp16 keeps 11 significant bits: half an ulp is 2^-11 relative.
            assert!((v - b).abs() <= v.abs() * 2f32.powi(-11), "{v} -> {b}");
        }
        assert_eq!(back[1], 1.0);
        assert_ne!(back[3], 0.1, "0.1 is not a half");
    }

    #[test]
    fn names_parse_back() {
        for p in Precision::ALL {
            assert_eq!(Precision::parse(p.name()), Some(p));
            assert_eq!(
                p.size() as usize * 8,
                if p == Precision::Fp16 { 16 } else { 32 }
            );
        }
        assert_eq!(Precision::parse("bf16"), None);
    }
}

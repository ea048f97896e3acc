//! ORT tensors over memory the caller owns: the CPU buffers of the roundtrip pattern and the
//! CUDA device pointers of the shared-memory pattern's CUDA domain. No copies: ORT reads and
//! writes the caller's memory in place.

use std::ptr::NonNull;

use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::value::{Shape, Tensor};
use ort::AsPointer;

pub(super) fn cpu_memory_info() -> ort::Result<MemoryInfo<'static>> {
    MemoryInfo::new(
        AllocationDevice::CPU,
        0,
        AllocatorType::Device,
        MemoryType::Default,
    )
}

pub(super) fn cuda_memory_info(device_id: i32) -> ort::Result<MemoryInfo<'static>> {
    MemoryInfo::new(
        AllocationDevice::CUDA,
        device_id,
        AllocatorType::Device,
        MemoryType::Default,
    )
}

pub(super) fn to_shape(dims: [usize; 4]) -> Shape {
    Shape::new(dims.map(|d| d as i64))
}

/// An owned `ort` tensor over caller memory (CPU or CUDA, as `mem` says), as
/// `OutputSelector::preallocate` needs an owned `Value` and `TensorRefMut` cannot be turned
/// into one (its `try_upgrade` refuses borrowed data). `CreateTensorWithDataAsOrtValue` does
/// not take ownership of the data, so dropping the value releases only ORT's tensor header.
///
/// # Safety
/// `data` holds `shape` f32 elements in the memory `mem` describes; the returned value must
/// only be used by runs while that memory is alive and not otherwise accessed.
pub(super) unsafe fn wrap_f32_memory(
    mem: MemoryInfo<'static>,
    data: *mut std::ffi::c_void,
    shape: [usize; 4],
    allocator: &Allocator,
) -> ort::Result<Tensor<f32>> {
    let dims = shape.map(|d| d as i64);
    let bytes = shape.iter().product::<usize>() * std::mem::size_of::<f32>();
    let mut value: *mut ort::sys::OrtValue = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; `data` has `shape` elements (caller).
    unsafe {
        ort::Error::result_from_status((ort::api().CreateTensorWithDataAsOrtValue)(
            mem.ptr(),
            data,
            bytes,
            dims.as_ptr(),
            dims.len(),
            ort::sys::ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
            &mut value,
        ))?;
    }
    let value = NonNull::new(value)
        .ok_or_else(|| ort::Error::new("CreateTensorWithDataAsOrtValue returned null"))?;
    // SAFETY: `value` is a fresh tensor we own; `from_ptr` insists on an allocator for
    // tensors, and the session's CPU allocator describes the same memory kind.
    Ok(unsafe { Tensor::from_ptr(value, Some(allocator)) })
}

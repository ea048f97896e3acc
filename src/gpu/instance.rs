//! Vulkan instance, the validation layer and the debug messenger that counts its errors.

use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ash::{ext, vk};

use super::{Error, Result};

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Whether to load the validation layer, decided once at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validation {
    Off,
    /// Use it when installed, warn when not (debug builds).
    IfAvailable,
    /// Fail without it (tests and CI: a missing layer must not pass as zero errors).
    Required,
}

impl Validation {
    /// `UPSCALE_VALIDATION=1` requires the layer, `=0` turns it off; otherwise debug builds use it
    /// when present.
    pub fn from_env() -> Self {
        match std::env::var("UPSCALE_VALIDATION").as_deref() {
            Ok("1") | Ok("required") => Validation::Required,
            Ok("0") | Ok("off") => Validation::Off,
            _ if cfg!(debug_assertions) => Validation::IfAvailable,
            _ => Validation::Off,
        }
    }
}

/// Counts validation errors; shared with the messenger callback through its user-data pointer.
#[derive(Default, Debug)]
pub struct ValidationCounter {
    errors: AtomicU32,
    warnings: AtomicU32,
}

impl ValidationCounter {
    pub fn errors(&self) -> u32 {
        self.errors.load(Ordering::Relaxed)
    }
    pub fn warnings(&self) -> u32 {
        self.warnings.load(Ordering::Relaxed)
    }
}

pub struct Instance {
    pub entry: ash::Entry,
    pub raw: ash::Instance,
    pub debug_utils: Option<ext::debug_utils::Instance>,
    messenger: vk::DebugUtilsMessengerEXT,
    /// Kept alive as long as the messenger, which holds a raw pointer to it.
    pub counter: Arc<ValidationCounter>,
    pub validation_enabled: bool,
}

/// Whether to enable the validation layer, given what was asked and whether it is installed.
fn use_validation(validation: Validation, has_layer: bool) -> Result<bool> {
    match (validation, has_layer) {
        (Validation::Off, _) => Ok(false),
        (_, true) => Ok(true),
        (Validation::IfAvailable, false) => {
            tracing::warn!("validation layer not installed; running without it (`make setup` installs vulkan-validationlayers)");
            Ok(false)
        }
        (Validation::Required, false) => Err(Error::Missing(
            "UPSCALE_VALIDATION=1 asks for VK_LAYER_KHRONOS_validation, which is not installed: run `make setup` (Debian package vulkan-validationlayers)".into(),
        )),
    }
}

/// The messenger that counts (and logs) validation errors and warnings into `counter`, which
/// must outlive it (the callback holds a raw pointer to it).
fn create_messenger(
    du: &ext::debug_utils::Instance,
    counter: &Arc<ValidationCounter>,
) -> Result<vk::DebugUtilsMessengerEXT> {
    let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
                | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE
                | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL,
        )
        .pfn_user_callback(Some(on_message))
        .user_data(Arc::as_ptr(counter) as *mut c_void);
    Ok(unsafe { du.create_debug_utils_messenger(&info, None)? })
}

impl Instance {
    /// `surface_extensions` comes from ash-window for a windowed run, empty when headless.
    pub fn new(validation: Validation, surface_extensions: &[*const i8]) -> Result<Self> {
        // SAFETY: loading the system Vulkan loader; no other Vulkan call is in flight.
        let entry = unsafe { ash::Entry::load()? };
        let layers = unsafe { entry.enumerate_instance_layer_properties()? };
        let has_layer = layers
            .iter()
            .any(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER));
        let validation_enabled = use_validation(validation, has_layer)?;
        let has_debug_utils = unsafe { entry.enumerate_instance_extension_properties(None)? }
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(ext::debug_utils::NAME));

        let mut extensions: Vec<*const i8> = surface_extensions.to_vec();
        if has_debug_utils {
            extensions.push(ext::debug_utils::NAME.as_ptr());
        }
        let layer_ptrs: Vec<*const i8> = if validation_enabled {
            vec![VALIDATION_LAYER.as_ptr()]
        } else {
            vec![]
        };
        let app_name = CString::new("upscale-demo").unwrap();
        let app_info = vk::ApplicationInfo::default()
            .application_name(&app_name)
            .api_version(vk::API_VERSION_1_3);
        // Synchronization validation is off by default in the layer; it is the check that
        // catches missing barriers between the scene, upscale and composite passes.
        let enables = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features =
            vk::ValidationFeaturesEXT::default().enabled_validation_features(&enables);
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app_info)
            .enabled_extension_names(&extensions)
            .enabled_layer_names(&layer_ptrs);
        if validation_enabled {
            info = info.push_next(&mut features);
        }
        let raw = unsafe { entry.create_instance(&info, None)? };

        let counter = Arc::new(ValidationCounter::default());
        let (debug_utils, messenger) = if has_debug_utils {
            let du = ext::debug_utils::Instance::new(&entry, &raw);
            let messenger = if validation_enabled {
                create_messenger(&du, &counter)?
            } else {
                vk::DebugUtilsMessengerEXT::null()
            };
            (Some(du), messenger)
        } else {
            (None, vk::DebugUtilsMessengerEXT::null())
        };
        Ok(Self {
            entry,
            raw,
            debug_utils,
            messenger,
            counter,
            validation_enabled,
        })
    }

    /// # Safety
    /// Every object created from this instance (device, surface) must be destroyed first, and
    /// the instance is not used afterwards.
    pub unsafe fn destroy(&self) {
        if let Some(du) = &self.debug_utils {
            if self.messenger != vk::DebugUtilsMessengerEXT::null() {
                du.destroy_debug_utils_messenger(self.messenger, None);
            }
        }
        self.raw.destroy_instance(None);
    }
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    let counter = &*(user as *const ValidationCounter);
    let message = if data.is_null() || (*data).p_message.is_null() {
        "(no message)".into()
    } else {
        CStr::from_ptr((*data).p_message).to_string_lossy()
    };
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        counter.errors.fetch_add(1, Ordering::Relaxed);
        tracing::error!(target: "vulkan", "{message}");
    } else {
        counter.warnings.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(target: "vulkan", "{message}");
    }
    vk::FALSE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_is_used_when_asked_and_installed_and_required_fails_without_it() {
        assert!(!use_validation(Validation::Off, true).unwrap());
        assert!(use_validation(Validation::IfAvailable, true).unwrap());
        assert!(!use_validation(Validation::IfAvailable, false).unwrap());
        assert!(use_validation(Validation::Required, true).unwrap());
        let e = use_validation(Validation::Required, false).unwrap_err();
        assert!(e.to_string().contains("vulkan-validationlayers"), "{e}");
    }
}

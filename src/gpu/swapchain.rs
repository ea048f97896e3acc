//! The window's swapchain. Out-of-date and suboptimal are control flow (recreate), not errors.

use ash::{khr, vk};

use super::guard::Destroy;
use super::{Gpu, Result};

pub struct Swapchain {
    loader: khr::swapchain::Device,
    pub raw: vk::SwapchainKHR,
    pub images: Vec<vk::Image>,
    pub views: Vec<vk::ImageView>,
    pub format: vk::Format,
    pub extent: vk::Extent2D,
    /// One per swapchain image: signalled by the frame's last submission that wrote the image,
    /// waited on by `vkQueuePresentKHR` for that image.
    pub present_ready: Vec<vk::Semaphore>,
    /// The mode presenting runs in, and why it is not the one asked for (if it is not).
    pub present_mode: PresentMode,
    pub present_fallback: Option<String>,
}

/// How presented images reach the screen (`window.present_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresentMode {
    /// Wait for vertical blank, never drop a frame (vsync; every surface has it).
    Fifo,
    /// Replace the queued image at each present: no tearing, no wait.
    Mailbox,
    /// Show at once: may tear.
    Immediate,
}

impl PresentMode {
    pub const ALL: [PresentMode; 3] = [Self::Fifo, Self::Mailbox, Self::Immediate];

    pub fn name(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Mailbox => "mailbox",
            Self::Immediate => "immediate",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    fn raw(self) -> vk::PresentModeKHR {
        match self {
            Self::Fifo => vk::PresentModeKHR::FIFO,
            Self::Mailbox => vk::PresentModeKHR::MAILBOX,
            Self::Immediate => vk::PresentModeKHR::IMMEDIATE,
        }
    }
}

/// What acquiring an image told us.
pub enum Acquired {
    Image(u32),
    /// The swapchain no longer matches the surface: recreate it and skip this frame.
    OutOfDate,
}

impl Swapchain {
    pub fn new(
        gpu: &Gpu,
        surface_loader: &khr::surface::Instance,
        surface: vk::SurfaceKHR,
        window: vk::Extent2D,
        requested: PresentMode,
        old: Option<&Swapchain>,
    ) -> Result<Self> {
        let caps = unsafe {
            surface_loader.get_physical_device_surface_capabilities(gpu.physical, surface)?
        };
        let formats =
            unsafe { surface_loader.get_physical_device_surface_formats(gpu.physical, surface)? };
        let modes = unsafe {
            surface_loader.get_physical_device_surface_present_modes(gpu.physical, surface)?
        };
        let format = choose_format(&formats);
        let (present_mode, present_fallback) = choose_present_mode(requested, &modes);
        if let Some(why) = &present_fallback {
            tracing::warn!("{why}");
        }
        let extent = choose_extent(&caps, window);
        let count = choose_image_count(&caps);
        let info = vk::SwapchainCreateInfoKHR::default()
            .surface(surface)
            .min_image_count(count)
            .image_format(format.format)
            .image_color_space(format.color_space)
            .image_extent(extent)
            .image_array_layers(1)
            .image_usage(vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC)
            .image_sharing_mode(vk::SharingMode::EXCLUSIVE)
            .pre_transform(caps.current_transform)
            .composite_alpha(vk::CompositeAlphaFlagsKHR::OPAQUE)
            .present_mode(present_mode.raw())
            .clipped(true)
            .old_swapchain(old.map_or(vk::SwapchainKHR::null(), |o| o.raw));
        let loader = khr::swapchain::Device::new(&gpu.instance.raw, &gpu.device);
        let raw = RawSwapchain {
            loader: loader.clone(),
            raw: unsafe { loader.create_swapchain(&info, None)? },
        }
        .guard(gpu);
        let images = unsafe { loader.get_swapchain_images(raw.raw)? };
        let (views, present_ready) = per_image_objects(gpu, &images, format.format)?;
        tracing::debug!(
            "swapchain {}x{} {:?} {:?}, {} images",
            extent.width,
            extent.height,
            format.format,
            present_mode,
            images.len()
        );
        Ok(Self {
            loader,
            raw: raw.keep().raw,
            images,
            views,
            format: format.format,
            extent,
            present_ready,
            present_mode,
            present_fallback,
        })
    }

    /// `signal` is signalled when the image may be written.
    pub fn acquire(&self, signal: vk::Semaphore) -> Result<Acquired> {
        let result = unsafe {
            self.loader
                .acquire_next_image(self.raw, u64::MAX, signal, vk::Fence::null())
        };
        match result {
            // A suboptimal image is still usable; present reports it and we recreate then.
            Ok((index, _suboptimal)) => Ok(Acquired::Image(index)),
            Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok(Acquired::OutOfDate),
            Err(e) => Err(e.into()),
        }
    }

    /// Returns true when the swapchain should be recreated.
    pub fn present(&self, queue: vk::Queue, index: u32) -> Result<bool> {
        let waits = [self.present_ready[index as usize]];
        let swapchains = [self.raw];
        let indices = [index];
        let info = vk::PresentInfoKHR::default()
            .wait_semaphores(&waits)
            .swapchains(&swapchains)
            .image_indices(&indices);
        match unsafe { self.loader.queue_present(queue, &info) } {
            Ok(suboptimal) => Ok(suboptimal),
            Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// # Safety
    /// No submitted work still uses the images or semaphores (the caller waited on the frame fences).
    pub unsafe fn destroy(self, gpu: &Gpu) {
        for &view in &self.views {
            gpu.device.destroy_image_view(view, None);
        }
        for &sem in &self.present_ready {
            gpu.device.destroy_semaphore(sem, None);
        }
        self.loader.destroy_swapchain(self.raw, None);
    }
}

/// The surface's extent when it dictates one, else the window's clamped to what it allows.
fn choose_extent(caps: &vk::SurfaceCapabilitiesKHR, window: vk::Extent2D) -> vk::Extent2D {
    if caps.current_extent.width != u32::MAX {
        return caps.current_extent;
    }
    vk::Extent2D {
        width: window
            .width
            .clamp(caps.min_image_extent.width, caps.max_image_extent.width),
        height: window
            .height
            .clamp(caps.min_image_extent.height, caps.max_image_extent.height),
    }
}

/// One image more than the minimum, so acquiring does not wait on the presentation engine;
/// within the maximum where there is one (0 = no limit).
fn choose_image_count(caps: &vk::SurfaceCapabilitiesKHR) -> u32 {
    let count = caps.min_image_count + 1;
    if caps.max_image_count > 0 {
        count.min(caps.max_image_count)
    } else {
        count
    }
}

/// A view and a present-ready semaphore per swapchain image, all named.
fn per_image_objects(
    gpu: &Gpu,
    images: &[vk::Image],
    format: vk::Format,
) -> Result<(Vec<vk::ImageView>, Vec<vk::Semaphore>)> {
    let mut views = Vec::with_capacity(images.len()).guard(gpu);
    let mut present_ready = Vec::with_capacity(images.len()).guard(gpu);
    for (i, &image) in images.iter().enumerate() {
        let view_info = vk::ImageViewCreateInfo::default()
            .image(image)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(format)
            .subresource_range(super::barrier::color_range());
        let view = unsafe { gpu.device.create_image_view(&view_info, None)? };
        views.push(view);
        let sem = unsafe {
            gpu.device
                .create_semaphore(&vk::SemaphoreCreateInfo::default(), None)?
        };
        present_ready.push(sem);
        gpu.name(image, &format!("swapchain image {i}"));
        gpu.name(view, &format!("swapchain view {i}"));
        gpu.name(sem, &format!("present-ready semaphore {i}"));
    }
    Ok((views.keep(), present_ready.keep()))
}

/// The swapchain handle before [`Swapchain`] owns it (destroying it needs its loader).
struct RawSwapchain {
    loader: khr::swapchain::Device,
    raw: vk::SwapchainKHR,
}

impl Destroy for RawSwapchain {
    fn destroy_with(self, _gpu: &Gpu) {
        unsafe { self.loader.destroy_swapchain(self.raw, None) }
    }
}

/// UNORM first: every pass writes display-encoded (sRGB) values itself.
fn choose_format(formats: &[vk::SurfaceFormatKHR]) -> vk::SurfaceFormatKHR {
    let preferred = [vk::Format::B8G8R8A8_UNORM, vk::Format::R8G8B8A8_UNORM];
    preferred
        .iter()
        .find_map(|&f| formats.iter().find(|s| s.format == f).copied())
        .unwrap_or(formats[0])
}

/// The requested mode where the surface has it, else FIFO (which every surface has) and the
/// reason, naming the modes the surface offers.
fn choose_present_mode(
    requested: PresentMode,
    supported: &[vk::PresentModeKHR],
) -> (PresentMode, Option<String>) {
    if requested == PresentMode::Fifo || supported.contains(&requested.raw()) {
        return (requested, None);
    }
    let offered: Vec<&str> = PresentMode::ALL
        .into_iter()
        .filter(|m| supported.contains(&m.raw()))
        .map(PresentMode::name)
        .collect();
    let why = format!(
        "window.present_mode = \"{}\": this surface does not offer it (it offers {}); using fifo",
        requested.name(),
        offered.join(", ")
    );
    (PresentMode::Fifo, Some(why))
}

/// True when the format stores sRGB-encoded values itself (the composite then writes linear).
pub fn is_srgb(format: vk::Format) -> bool {
    matches!(
        format,
        vk::Format::B8G8R8A8_SRGB | vk::Format::R8G8B8A8_SRGB
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(current: (u32, u32), min_count: u32, max_count: u32) -> vk::SurfaceCapabilitiesKHR {
        vk::SurfaceCapabilitiesKHR {
            current_extent: vk::Extent2D {
                width: current.0,
                height: current.1,
            },
            min_image_extent: vk::Extent2D {
                width: 16,
                height: 16,
            },
            max_image_extent: vk::Extent2D {
                width: 4096,
                height: 2048,
            },
            min_image_count: min_count,
            max_image_count: max_count,
            ..Default::default()
        }
    }

    #[test]
    fn the_surface_extent_wins_else_the_window_is_clamped() {
        let window = vk::Extent2D {
            width: 8000,
            height: 8,
        };
        let fixed = choose_extent(&caps((1280, 720), 2, 0), window);
        assert_eq!((fixed.width, fixed.height), (1280, 720));
        let free = choose_extent(&caps((u32::MAX, u32::MAX), 2, 0), window);
        assert_eq!((free.width, free.height), (4096, 16));
    }

    #[test]
    fn one_image_over_the_minimum_within_the_maximum() {
        assert_eq!(choose_image_count(&caps((1, 1), 2, 0)), 3);
        assert_eq!(choose_image_count(&caps((1, 1), 2, 8)), 3);
        assert_eq!(choose_image_count(&caps((1, 1), 3, 3)), 3);
    }

    #[test]
    fn an_unsupported_present_mode_falls_back_to_fifo_with_the_reason() {
        let fifo_immediate = [vk::PresentModeKHR::FIFO, vk::PresentModeKHR::IMMEDIATE];
        for (requested, supported, chosen) in [
            (PresentMode::Fifo, &fifo_immediate[..], PresentMode::Fifo),
            (
                PresentMode::Immediate,
                &fifo_immediate,
                PresentMode::Immediate,
            ),
            (PresentMode::Mailbox, &fifo_immediate, PresentMode::Fifo),
            (
                PresentMode::Immediate,
                &[vk::PresentModeKHR::FIFO],
                PresentMode::Fifo,
            ),
        ] {
            let (mode, why) = choose_present_mode(requested, supported);
            assert_eq!(mode, chosen, "{requested:?} on {supported:?}");
            assert_eq!(why.is_some(), mode != requested, "{why:?}");
        }
        let (_, why) = choose_present_mode(PresentMode::Mailbox, &fifo_immediate);
        assert_eq!(
            why.unwrap(),
            "window.present_mode = \"mailbox\": this surface does not offer it \
             (it offers fifo, immediate); using fifo"
        );
    }
}

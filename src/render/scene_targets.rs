//! The scene pass's render-size targets: the single-sample colour image the upscalers read, the
//! depth buffer and, with MSAA, the multisampled colour attachment that resolves into that image.
//! Made with the pass's sample count when a pass needs them (start-up, the compare view turned
//! on), never per frame.

use ash::vk;

use super::scene::{COLOR_FORMAT, DEPTH_FORMAT, MSAA_COLOR_FORMAT};
use crate::gpu::{self, Destroy, Gpu, Image, ImageDesc};

/// The multisampled colour attachment and where it resolves to.
pub(super) struct Multisampled {
    /// `MSAA_COLOR_FORMAT`, `samples` per pixel; only the scene pass touches it.
    pub color: Image,
    /// An sRGB view of the single-sample scene colour image: the resolve target. Through it the
    /// resolve averages the samples in linear light and stores display-encoded values, which the
    /// upscalers read through the image's own UNORM view as they do without MSAA.
    pub resolve_view: vk::ImageView,
}

/// Render-size targets; recreated together when the render size changes.
pub struct SceneTargets {
    /// The low-resolution frame: colour attachment (or resolve target) here, sampled/copied by
    /// the upscalers.
    pub color: Image,
    /// `samples` per pixel, like the colour attachment.
    pub(super) depth: Image,
    /// Present when the pass renders more than one sample per pixel.
    pub(super) multisampled: Option<Multisampled>,
    /// Drawn with the pass's upscaler-input mip bias (`ScenePass::upscale_targets`).
    pub(super) mip_biased: bool,
}

impl SceneTargets {
    /// Targets of `size` for a scene pass of `samples` per pixel (TYPE_1: no MSAA, the colour
    /// image is the attachment itself). Use [`super::scene::ScenePass::targets`], which passes
    /// its own sample count.
    pub(super) fn new(
        gpu: &Gpu,
        size: vk::Extent2D,
        samples: vk::SampleCountFlags,
    ) -> gpu::Result<Self> {
        let msaa = samples != vk::SampleCountFlags::TYPE_1;
        let mut color_desc = ImageDesc::new_2d(
            size,
            COLOR_FORMAT,
            vk::ImageUsageFlags::COLOR_ATTACHMENT
                | vk::ImageUsageFlags::SAMPLED
                | vk::ImageUsageFlags::STORAGE
                | vk::ImageUsageFlags::TRANSFER_SRC,
        );
        if msaa {
            color_desc.view_formats = &[MSAA_COLOR_FORMAT];
        }
        let color = Image::new(gpu, "scene colour (render size)", color_desc)?.guard(gpu);
        let mut depth_desc = ImageDesc::new_2d(
            size,
            DEPTH_FORMAT,
            vk::ImageUsageFlags::DEPTH_STENCIL_ATTACHMENT,
        );
        if msaa {
            depth_desc.samples = samples;
            depth_desc.usage |= vk::ImageUsageFlags::TRANSIENT_ATTACHMENT;
        }
        let depth = Image::new(gpu, "scene depth", depth_desc)?.guard(gpu);
        let multisampled = match msaa {
            true => Some(Multisampled::new(gpu, &color, samples)?),
            false => None,
        };
        Ok(Self {
            color: color.keep(),
            depth: depth.keep(),
            multisampled,
            mip_biased: false,
        })
    }

    /// Samples per pixel of the attachments the pass draws into.
    pub fn samples(&self) -> vk::SampleCountFlags {
        self.depth.desc.samples
    }

    pub fn destroy(self, gpu: &Gpu) {
        if let Some(m) = self.multisampled {
            unsafe { gpu.device.destroy_image_view(m.resolve_view, None) };
            m.color.destroy(gpu);
        }
        self.depth.destroy(gpu);
        self.color.destroy(gpu);
    }
}

impl Multisampled {
    fn new(gpu: &Gpu, resolve: &Image, samples: vk::SampleCountFlags) -> gpu::Result<Self> {
        let mut desc = ImageDesc::new_2d(
            resolve.extent(),
            MSAA_COLOR_FORMAT,
            vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSIENT_ATTACHMENT,
        );
        desc.samples = samples;
        let color = Image::new(gpu, "scene colour (multisampled)", desc)?.guard(gpu);
        let resolve_view = resolve.format_view(
            gpu,
            "scene colour (sRGB resolve view)",
            MSAA_COLOR_FORMAT,
            vk::ImageUsageFlags::COLOR_ATTACHMENT,
        )?;
        Ok(Self {
            color: color.keep(),
            resolve_view,
        })
    }
}

impl Destroy for SceneTargets {
    fn destroy_with(self, gpu: &Gpu) {
        self.destroy(gpu);
    }
}

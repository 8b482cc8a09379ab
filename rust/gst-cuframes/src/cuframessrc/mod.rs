//! `cuframessrc`: subscribes to a cuframes key and pushes its frames.

use gst::glib;
use gst::prelude::*;

mod imp;

glib::wrapper! {
    /// The element.
    pub struct CuframesSrc(ObjectSubclass<imp::CuframesSrc>)
        @extends gst_base::PushSrc, gst_base::BaseSrc, gst::Element, gst::Object;
}

/// Registers `cuframessrc` with the plugin.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    crate::settings::ModeProp::static_type().mark_as_plugin_api(gst::PluginAPIFlags::empty());
    gst::Element::register(
        Some(plugin),
        "cuframessrc",
        gst::Rank::NONE,
        CuframesSrc::static_type(),
    )
}

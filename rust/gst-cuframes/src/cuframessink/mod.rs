//! `cuframessink`: publishes every buffer it receives under a cuframes key.

use gst::glib;
use gst::prelude::*;

mod imp;

glib::wrapper! {
    /// The element.
    pub struct CuframesSink(ObjectSubclass<imp::CuframesSink>)
        @extends gst_base::BaseSink, gst::Element, gst::Object;
}

/// Registers `cuframessink` with the plugin.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    crate::settings::PolicyProp::static_type().mark_as_plugin_api(gst::PluginAPIFlags::empty());
    crate::settings::V1PeersProp::static_type().mark_as_plugin_api(gst::PluginAPIFlags::empty());
    gst::Element::register(
        Some(plugin),
        "cuframessink",
        gst::Rank::NONE,
        CuframesSink::static_type(),
    )
}

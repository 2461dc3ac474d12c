//! Header views (placeholder until the wire module lands).

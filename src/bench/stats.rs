//! Statistics (placeholder).

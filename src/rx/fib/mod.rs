//! Longest-prefix-match tables (placeholder).

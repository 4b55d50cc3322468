//! Terminal output.

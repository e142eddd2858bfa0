//! P4 control plane (todo)

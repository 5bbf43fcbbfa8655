"""Messages and table records <-> the arrays of core: network (PathColumns), inventory (NodeView), tasks (ScoringInputs)."""

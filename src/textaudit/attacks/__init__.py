"""Second-order attacks (SO-Enum, SO-Beam) and first-order baselines (Genetic, BAE)."""

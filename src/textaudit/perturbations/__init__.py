"""Text perturbations (character/word noise, reorderings) registered by name."""

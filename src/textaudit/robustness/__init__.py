"""Robustness science: perturbation learnability, robustness, post-augmentation gain, PerturbScore."""

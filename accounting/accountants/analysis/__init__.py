"""The analyses the accountants are built from (as opacus keeps ``accountants/analysis``): the
PLD grid and its proven error bounds, the fast PLD convolution, the leaves of a composition as
PLDs, the bounded-range blocks, the (epsilon, delta) parameters, and the run-time check of the
subsampled Gaussian's PMF."""

"""dp-bcfw-secure's sufficient-statistics path for the logistic loss (the default): the
expansion's statistics released once and the model fitted from them (docs/sensitivity.md
4.10).  ``release`` (the math), ``party``, ``roles``, ``solve``."""

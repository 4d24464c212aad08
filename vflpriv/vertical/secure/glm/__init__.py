"""dp-bcfw-secure's glm path for the logistic loss: the loss's derivatives under secret sharing
every round, with a helper party (docs/sensitivity.md section 5).  ``party``, ``loop`` (the
server's rounds), ``roles``, ``saves``, ``solve``."""

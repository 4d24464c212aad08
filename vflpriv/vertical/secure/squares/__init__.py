"""dp-bcfw-secure's least-squares path: cross-products released once per newly selected
feature (docs/sensitivity.md section 4).  ``party`` (the parties and their steps), ``loop`` (the
server's round loop), ``roles`` (the same as roles over a link)."""

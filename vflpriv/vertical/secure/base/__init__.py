"""What every path of dp-bcfw-secure builds on, and least squares no more than the others: a
party's block as the protocol reads it (``blocks``), the party's side of the secure products
(``party``), its role over a link and the server's steps that reach it (``roles``), and the
model's evaluation from the rounds' picks (``evaluation``)."""

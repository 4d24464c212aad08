"""The federated runtime: roles exchanging typed, serialized messages over a transport.

Layers (docs/architecture.md; ``tests/test_architecture.py`` fails on a cycle or an upward
import)::

    accounting  <-  vflpriv core (data, optim, kernels, runtime)  <-  families (vertical,
    sparse, horizontal)  <-  backends (vflpriv.flower)  <-  commands (cli, bench, reproduce)

What lives here, below the families and free of Flower:

- :mod:`.link`: the transport every remote run uses -- ``connect`` then ``exchange`` frames
  with parties by index, metering every byte -- with :class:`~.link.LocalLink`, its in-process
  implementation, and the errors a transport reports (:class:`~.link.PartyLost`,
  :class:`~.link.PartyRefused`);
- :mod:`.roles`: a party's role (:class:`~.roles.PartyRole`: answers one message, keeps its
  state between messages), its own budget, and the message handling every host shares;
- :mod:`.families`: which module holds each family's server role and party role;
- :mod:`.backends`: the backends by name and :func:`~.backends.launch`, which hosts a run's
  roles on the backend the caller picked (Flower's apps are found by name, on use, as Flower
  itself loads apps, so nothing here imports :mod:`vflpriv.flower`);
- :mod:`.partydata`: a party's own files and noise seed.
"""

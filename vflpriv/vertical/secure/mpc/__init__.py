"""The secure computation under dp-bcfw-secure, with no DP and no path in it: the ring
(fixed point over Z_{2^64}, shares, AES-CTR PRG), the dealer-assisted Beaver products, the
sigmoid's Fourier series on shares, the sealed party-to-party channel, the store of masked
blocks, the wire messages and the phase-timed link."""

"""The pure scoring core: records and verdicts in, numbers out. No I/O, no clock, no global RNG."""

"""The batch jobs, started by `loc-payments` (`cli`): the collection job (`collect`), the
reshard of GSI2 (`reshard`), and their checkpoints and reports (`checkpoint`)."""

__all__: list[str] = []

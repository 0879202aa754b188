"""The batch jobs, started by `loc-payments` (`server.cli`): the collection job (`collect`), the
reshard of GSI2 (`reshard`), their checkpoints and reports (`checkpoint`), and the
demonstration data a new local table gets (`demo_data`)."""

"""The service's deployment as code: the CloudFormation stack (`stack`), which `loc-payments
template` prints into `stack.template.json` beside it."""

__all__: list[str] = []

"""`loc-payments`, the command line (`main`): it starts the service (`serve_command`), the batch
jobs (`collect_command`, `reshard_command`), checks trusted documents (`documents_command`) and
schema changes (`schema_command`), and prints the CloudFormation stack (`infra.stack`)."""

__all__: list[str] = []

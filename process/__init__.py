"""What every process of the service starts from, the server's and the jobs' alike: the settings
(`process.settings`), start-up (`process.bootstrap`: the store and the embedded DynamoDB Local;
`process.runtime`: uvicorn), the JSON log lines (`process.logs`), tracing's set-up
(`process.tracing`), the embedded DynamoDB (`process.embedded_dynamodb`) and the status line the
alarms read (`process.status_log`). It sits below `server/` and `jobs/`, which both use it, and
above the store, the resolvers and the schema, which it never hands a setting to by import."""

__all__: list[str] = []

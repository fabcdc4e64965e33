"""The capacity-launcher operator CLI: apply, get, delete, submit, status against a deployment.
The local cloud (`local up`, `demo`, `invoke`) lives in the `local_cloud` package."""

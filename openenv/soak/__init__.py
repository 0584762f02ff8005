"""The fault soak behind `openenv soak`: real harness episodes with injected faults, and a ledger that
accounts for every request (`runner`), the fault-injecting proxy in front of the engine (`faults`) and the
relay that counts what a harness sends (`relay`), and the vLLM CPU server it starts when given no engine
(`vllm_server`, also the test suite's and the benchmarks'). A product module: the test suite drives it, it does not
depend on the tests (`openenv.testing` holds test helpers only)."""

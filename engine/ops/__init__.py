"""Operations: the command line, the dashboard, metrics, tracing, logs and the demo."""

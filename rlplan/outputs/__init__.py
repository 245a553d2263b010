"""What a user reads: run folders written atomically, Markdown and HTML reports, Gantt and
Perfetto traces, the plan in framework vocabulary, and the framework exporters."""

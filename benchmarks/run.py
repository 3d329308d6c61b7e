"""Run every benchmark in turn (what ``make bench`` calls)."""

import runpy
from pathlib import Path

HERE = Path(__file__).parent

for script in ["stencil_cpu.py", "filters.py", "io_speed.py", "end_to_end.py", "startup.py"]:
    print(f"# {script}")
    runpy.run_path(str(HERE / script), run_name="__main__")

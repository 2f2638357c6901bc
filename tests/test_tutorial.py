"""docs/tutorial.ipynb executes top to bottom (nbclient) and is stored without outputs."""

from pathlib import Path

import nbformat
import pytest

NB = Path(__file__).resolve().parents[1] / "docs" / "tutorial.ipynb"


def test_tutorial_is_stored_without_outputs():
    nb = nbformat.read(NB, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None


@pytest.mark.slow
def test_tutorial_executes():
    from nbclient import NotebookClient

    nb = nbformat.read(NB, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NB.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "recommended" not in text or "'n':" in text

"""--allocators splits on the commas between specs, not on those inside a spec's arguments (issue 13)."""

from studies.cli import split_allocators


def test_split_allocators_keeps_spec_arguments_together():
    assert split_allocators("knapsack,schedule:double@0.25,0.5,variance:nmin=2,nmax=16,ada,"
                            "schedule:zv@0.5,window=4") == [
        "knapsack", "schedule:double@0.25,0.5", "variance:nmin=2,nmax=16", "ada", "schedule:zv@0.5,window=4"]
    assert split_allocators("knapsack, dynamic-sampling") == ["knapsack", "dynamic-sampling"]

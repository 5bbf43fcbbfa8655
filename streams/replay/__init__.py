"""The replay of `cnsched simulate` (issue 13): real job traces and network measurements in their
upstream formats (traces), driven through the scheduler on a simulated clock."""

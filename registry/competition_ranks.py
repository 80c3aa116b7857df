"""Competition ranks ("1, 1, 3"): where a run stands in its comparison group. The importer stores
ranks with it (services.imports.groups_rerank) and verify_registry re-derives them (integrity.py);
what the data supports beside a rank is read at page time (rank_status.py). A module of its own:
the writer, the check and a migration need this arithmetic and nothing of the page's."""


def competition_ranks(values: list[float]) -> list[int]:
    """Rank 1 is the lowest value; equal values share a rank and leave a gap ("1, 1, 3")."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    for position, index in enumerate(order):
        if position and values[index] == values[order[position - 1]]:
            ranks[index] = ranks[order[position - 1]]
        else:
            ranks[index] = position + 1
    return ranks

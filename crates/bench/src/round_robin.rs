//! Taking turns over a list: the item whose turn is `n`, starting again from the first after
//! the last (connections shared by clients, queues by senders, colours by series).

/// The item of `items` whose turn is `turn` (`turn` modulo the length); `None` when `items` is
/// empty.
pub fn pick<T>(items: &[T], turn: usize) -> Option<&T> {
    items.get(turn.checked_rem(items.len())?)
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn turns_wrap_around_and_an_empty_list_has_none() {
        let items = ["a", "b", "c"];
        let turns: Vec<&str> = (0..7).filter_map(|t| pick(&items, t).copied()).collect();
        assert_eq!(turns, ["a", "b", "c", "a", "b", "c", "a"]);
        assert_eq!(pick::<u8>(&[], 3), None);
    }
}

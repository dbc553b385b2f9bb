"""Statistics: uncertainty (bootstrap, intervals, paired tests, Holm), the research protocol
(designs, headline tables, comparisons), choices on validation and the sentences of conclusions."""

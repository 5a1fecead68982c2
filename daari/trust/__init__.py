"""Whether daari can vouch for an answer: what the prompt stated about it, and checks of the answer against that."""

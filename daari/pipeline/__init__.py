"""The request pipeline: what happens to one chat request between parsing and the response."""

// Placeholder (owner: profile helper).

// Placeholder (owner: runtime helper).

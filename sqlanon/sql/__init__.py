"""SQL compilation: templates, sqlglot guards and portable builders."""

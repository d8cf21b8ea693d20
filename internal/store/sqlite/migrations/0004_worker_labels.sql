-- Labels a worker daemon describes itself with (--labels), as a JSON object.
ALTER TABLE workers ADD COLUMN labels TEXT NOT NULL DEFAULT '{}';

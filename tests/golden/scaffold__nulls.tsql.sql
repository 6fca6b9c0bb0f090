SELECT COUNT_BIG(*) - COUNT_BIG([Age]) AS nulls FROM [main].[patients]

SELECT TOP 200 CAST([Disease] AS VARCHAR(MAX)) AS v FROM [main].[patients] WHERE NOT [Disease] IS NULL

"""The commerce backend behind the tools: products, live links, inventory, coupons, orders."""

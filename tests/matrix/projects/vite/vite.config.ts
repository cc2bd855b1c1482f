// The Worker built and served by Vite: @cloudflare/vite-plugin reads wrangler.toml.
import { cloudflare } from '@cloudflare/vite-plugin';
import { defineConfig } from 'vite';

export default defineConfig({ plugins: [cloudflare()] });

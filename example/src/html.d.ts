// wrangler's default module rules import an .html file as its text (type "Text").
declare module '*.html' {
  const text: string;
  export default text;
}
